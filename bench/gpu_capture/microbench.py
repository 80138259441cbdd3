"""Microbenchmarks captured under jax.profiler on one real GPU: a bf16 GEMM sweep (128^3 to 8192^3 and
four transformer-shaped GEMMs), streaming f32 elementwise kernels from 4 kB to 1 GB, and cuDNN fused
attention (BSHD, B=4 S=2048 H=16 D=128, causal and not, forward and backward).

Usage: python microbench.py OUT_DIR   (writes OUT_DIR/profile/plugins/profile/<run>/ and wall_timing.json)
Run with XLA_FLAGS=--xla_dump_to=... to keep the HLO dumps (and each module's gpu_target_config.pbtxt).
"""
import os, sys, time, json
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
import jax, jax.numpy as jnp
print(jax.__version__, jax.devices(), flush=True)
timing = {}

def bench(name, f, *args, reps=10):
    r = f(*args); jax.block_until_ready(r)
    t0 = time.perf_counter()
    for _ in range(reps):
        r = f(*args)
    jax.block_until_ready(r)
    timing[name] = (time.perf_counter() - t0) / reps

key = jax.random.PRNGKey(0)
gemms = {}
for n in [128, 256, 512, 1024, 2048, 4096, 8192]:
    a = jax.random.normal(key, (n, n), jnp.bfloat16); b = jax.random.normal(key, (n, n), jnp.bfloat16)
    gemms[n] = (jax.jit(lambda x, y: x @ y), a, b)
for n, (f, a, b) in gemms.items():
    f(a, b).block_until_ready()
# rectangular, as in transformers (tokens x d_model x d_ff)
rect = []
for (m, k, nn) in [(4096, 4096, 14336), (16384, 4096, 4096), (256, 8192, 8192), (8192, 8192, 256)]:
    a = jax.random.normal(key, (m, k), jnp.bfloat16); b = jax.random.normal(key, (k, nn), jnp.bfloat16)
    f = jax.jit(lambda x, y: x @ y); f(a, b).block_until_ready(); rect.append((f, a, b))
# streaming: y = x * 2 + 1, f32, 4 KB .. 1 GB
streams = []
for e in range(10, 29, 2):
    x = jnp.ones((2 ** e,), jnp.float32)
    f = jax.jit(lambda v: v * 2 + 1); f(x).block_until_ready(); streams.append((f, x))
# cuDNN fused attention, BSHD, forward and backward, causal and not
attn = []
B, S, H, D = 4, 2048, 16, 128
q = jax.random.normal(key, (B, S, H, D), jnp.bfloat16)
for causal in (False, True):
    try:
        fwd = jax.jit(lambda q, k, v, c=causal: jax.nn.dot_product_attention(q, k, v, is_causal=c, implementation="cudnn"))
        loss = lambda q, k, v, c=causal: jax.nn.dot_product_attention(q, k, v, is_causal=c, implementation="cudnn").astype(jnp.float32).sum()
        bwd = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
        jax.block_until_ready(fwd(q, q, q)); jax.block_until_ready(bwd(q, q, q))
        attn.append((causal, fwd, bwd))
    except Exception as e:
        print("cudnn attention failed:", type(e).__name__, str(e)[:300], flush=True)
for n, (f, a, b) in gemms.items():
    bench(f"gemm{n}", f, a, b)
for i, (f, a, b) in enumerate(rect):
    bench(f"rect{i}", f, a, b)
for f, x in streams:
    bench(f"stream{x.size}", f, x)
for causal, fwd, bwd in attn:
    bench(f"attn_fwd_causal{causal}", fwd, q, q, q); bench(f"attn_bwd_causal{causal}", bwd, q, q, q)

with jax.profiler.trace(os.path.join(out, "profile")):
    for _ in range(5):
        for n, (f, a, b) in gemms.items():
            f(a, b).block_until_ready()
        for f, a, b in rect:
            f(a, b).block_until_ready()
        for f, x in streams:
            f(x).block_until_ready()
        for causal, fwd, bwd in attn:
            jax.block_until_ready(fwd(q, q, q)); jax.block_until_ready(bwd(q, q, q))
json.dump(timing, open(os.path.join(out, "wall_timing.json"), "w"), indent=1)
print(json.dumps(timing, indent=1))
