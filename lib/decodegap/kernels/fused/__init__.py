"""kernels/fused"""
