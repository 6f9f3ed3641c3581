# A stand-in for Colab's `google.colab`, for the Colab lane (tools/colab/lane.py): the chapters' set-up cell only
# imports it to know it runs on Colab. `google` is a namespace package, as on Colab (google-colab, google-auth and
# protobuf share it), so this directory holds no google/__init__.py.
