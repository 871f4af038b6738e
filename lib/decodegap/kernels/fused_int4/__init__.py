"""The fused decode step on int4 weights (Triton): the int4 GEMV inside the fused step's design.

  source     the Triton kernel (the int4 GEMV's loop, the fused GEMV's prologues and epilogues, PDL)
  launch     fused_int4_gemv: its arguments checked, its config chosen (configs' table, else tuned per shape and
             flavour), launched
  configs    the table of launch configs per shape, flavour and launch, from bench/fused_int4_gemv.py's rows
  flavours   each flavour's product beside its reference
  reference  the int4 layer's rounding in PyTorch, which the fused references call for an int4 weight
decodegap.kernels.fused.launch.FusedOps runs it for every int4-triton weight of a lean decoder's fused step.
"""
