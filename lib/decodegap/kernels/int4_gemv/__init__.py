"""int4 weight-only GEMV for batch-1 decode (Triton): the package's own quantisation path `int4-triton`.

  format  the packed codes, bf16 scales and offsets; round to nearest and its inverse (PyTorch, any device)
  kernel  the Triton GEMV of one row, autotuned per shape (its design in the module's docstring)
  ops     the kernel as the custom operator decodegap::int4_gemv, opaque to torch.compile
  layer   Int4GemvLinear: a row through the kernel, a prefill dequantised and multiplied
Its tuner, the kernel against tinygemm and bf16 per product shape, is bench/int4_gemv.py.
"""
