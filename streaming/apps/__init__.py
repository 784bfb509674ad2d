"""The applications built on the library: the config-file job runner (``python -m streaming.job``)
and the demo (``python -m streaming.demo``)."""
