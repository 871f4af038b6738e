"""quant"""
