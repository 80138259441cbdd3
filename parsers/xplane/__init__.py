"""The XPlane format (`*.xplane.pb`, what `jax.profiler` writes): the XSpace schema, its lines
decoded lazily and in C where built (`xline`), each platform's op events (TPU, GPU, CPU), the host's
Python thread, and the reader of one host (`reader`)."""
