"""A probe of bf16 GEMM shapes on one GPU: torch (cuBLAS) and JAX (XLA) at the edges Lab 01 teaches (Lab 01).

Run once on an H100 on 2026-11-26 during a cold read of Lab 01 (best of 5 x 50 back-to-back calls on the
same inputs, not the lab's fresh-input rule); its points are benchmarks/nvidia-h100-80gb-hbm3/shape_probe.json,
which Lab 01 reads (labkit.matmul.reference_chips.h100_cublas) beside bench_shapes.py's sweep, naming each rule.
On a machine without CUDA it runs the same shapes divided by 16 on the CPU (a smoke check).

    OUT=DIR python3 benchmarks/probe_shapes.py      # writes DIR/gpu.json
"""
import time, sys, json
import torch
SMALL = not torch.cuda.is_available()
dev = "cuda" if not SMALL else "cpu"
shapes = [(1024,4096,4096),(1025,4096,4096),(1152,4096,4096),(2048,4096,4096),(2049,4096,4096),(2176,4096,4096),
          (512,4096,4096),(640,4096,4096),(1,4096,4096),(16,4096,4096),
          (4096,128,4096),(4096,129,4096),(4096,136,4096),(4096,4096,4096),(4096,4097,4096),(4096,4104,4096),
          (4096,4096,4097),(5120,5120,5120),(4096+128,4096,4096)]
if SMALL: shapes=[(m//16 or 1,n//16 or 1,k//16 or 1) for m,n,k in shapes]
def t_torch(m,n,k,reps=50):
    a=torch.randn(m,k,device=dev,dtype=torch.bfloat16); b=torch.randn(k,n,device=dev,dtype=torch.bfloat16)
    for _ in range(5): c=a@b
    if SMALL:
        t=time.perf_counter(); [a@b for _ in range(reps)]; return (time.perf_counter()-t)/reps
    torch.cuda.synchronize(); best=1e9
    for _ in range(5):
        s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
        s.record(); [a@b for _ in range(reps)]; e.record(); torch.cuda.synchronize(); best=min(best,s.elapsed_time(e)/1e3/reps)
    return best
import jax, jax.numpy as jnp
f=jax.jit(lambda a,b: a@b)
def t_jax(m,n,k,reps=50):
    ka,kb=jax.random.split(jax.random.PRNGKey(0))
    a=jax.random.normal(ka,(m,k),jnp.bfloat16); b=jax.random.normal(kb,(k,n),jnp.bfloat16)
    for _ in range(3): f(a,b).block_until_ready()
    best=1e9
    for _ in range(5):
        t=time.perf_counter(); r=[f(a,b) for _ in range(reps)]; r[-1].block_until_ready(); best=min(best,(time.perf_counter()-t)/reps)
    return best
print("jax", jax.__version__, jax.devices(), "torch", torch.__version__, flush=True)
out=[]
for m,n,k in shapes:
    tt=t_torch(m,n,k); tj=t_jax(m,n,k); fl=2*m*n*k
    out.append(dict(M=m,N=n,K=k,torch_tflops=fl/tt/1e12,jax_tflops=fl/tj/1e12))
    print(f"M={m:5d} N={n:5d} K={k:5d}  torch {fl/tt/1e12:7.1f}  jax {fl/tj/1e12:7.1f} TFLOP/s", flush=True)
if not SMALL:
    # what XLA does with N=129: look for padding in the optimized HLO
    a=jnp.zeros((4096,4096),jnp.bfloat16); b=jnp.zeros((4096,129),jnp.bfloat16)
    txt=f.lower(a,b).compile().as_text()
    print("\n".join(l for l in txt.splitlines() if ("pad" in l or "custom-call" in l or "fusion" in l and "kind" in l))[:3000])
import os
json.dump(out, open(os.path.join(os.environ.get("OUT","/tmp"),"gpu.json"),"w"), indent=1)
