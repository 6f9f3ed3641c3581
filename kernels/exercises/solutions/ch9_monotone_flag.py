"""Chapter 9's exercise, the course's solution (see ../ch9_monotone_flag.py)."""

# ---- EXERCISE: ready(value, launch, parts) ----
def ready(value, launch, parts):
    # the counter started this launch at launch * parts (mod 2^32) and ends it parts higher: count the releases
    # of this launch as the distance from that start, modulo 2^32, so the wrap does not matter
    return (value - launch * parts) % 2**32 >= parts
# ---- END ----
