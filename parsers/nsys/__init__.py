"""NVIDIA Nsight Systems: nsys-jax archives (`archive`), SQLite exports (`sqlite`) and the NVTX
ranges XLA writes on the GPU timeline (`nvtx`)."""
