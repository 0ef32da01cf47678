"""Export and serving: train on TPU, serve on GPU, provably unchanged (Lab 05).

Modules:

- ``routes``     the ways a model leaves the framework it was trained in, and their parity
- ``stablehlo``  one serialized StableHLO program that runs on CPU, CUDA and TPU
- ``weights``    safetensors weights with a manifest
- ``bundle``     one bundle and one loader: weights + programs bound by a signed manifest
- ``manifest``   the manifest's error type, digests, schema and the identity (name, version) a server pins
- ``publish``    writing a bundle: everything checked first, then swapped in whole (the old one kept on failure)
- ``atomic``     files and folders written beside the target, fsync-ed and renamed in: never half-written
- ``reference``  the shipped CPU reference every runtime checks itself against; bf16 top-1 and KL
- ``kv_cache``   a KV cache for the course GPT in PyTorch and JAX
- ``serve``      a generation server loop and its benchmark: TTFT, per-token latency, tokens/s
- ``ranking``    which serving path is fastest, named only beyond the run's own noise (one program run two ways)
- ``batching``   what batching must buy a decode step, by device: ratio / 4 on a GPU or TPU, 1.5x on a CPU
- ``cuda_graph`` a static KV cache and a decode step captured as a CUDA graph (static buffers on CPU)
- ``slots``      batch slots that requests join and leave between decode steps (torch, JAX)
- ``load``       open-loop arrivals, static vs continuous batching, vLLM's TTFT/TPOT/ITL/E2E and goodput
- ``capacity``   where a capacity estimate missed: an engine timed under load, its cost per request by term
- ``plots``      the lab's pictures: the training loss, serving tokens/s and latency per path, under load
"""
