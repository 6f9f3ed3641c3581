"""What the chapters show: each chapter's models (coalescing, tiling, swizzle, layouts, tensor cores,
pipelines), pictures (plots), widgets and their static twins for the site (widgets, explore,
sitecontrols), kernel listings (show), figures glued into the prose (glue), exercises, and the
source documents' figures (documents)."""
