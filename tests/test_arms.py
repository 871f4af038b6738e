"""The arms registry (decodegap.arms): what each arm is, read from its fields, not its name."""

from decodegap import accounting, arms


def test_the_registry_derives_the_arm_groups_the_harness_uses():
    assert arms.ARMS == arms.ARMS and len(arms.ARMS) == 17
    assert set(arms.GRAPHED_ARMS) == {"graph", "lean_graph", "lean_kernels_graph", "lean_attn_graph", "lean_fused_graph",
                                      "lean_fused_pdl_graph", "lean_fused_pdl_norm_graph", "lean_fused_pdl_epilogues_graph",
                                      "lean_fused_early_graph", "lean_fused_early_products_graph"}
    assert set(arms.COMPILED_ARMS) == {"compile", "lean_compile", "lean_attn_compile"}
    assert arms.HF_ARMS == ("eager", "hf_default", "graph", "compile")
    assert set(arms.HF_ARMS) | set(arms.LEAN_ARMS) == set(arms.ARMS) and not set(arms.HF_ARMS) & set(arms.LEAN_ARMS)
    assert arms.ARM_KERNELS == {"lean_kernels": ("gemv", "attention"), "lean_kernels_graph": ("gemv", "attention"),
                                "lean_attn_graph": ("attention",), "lean_attn_compile": ("attention",),
                                "lean_fused_graph": ("fused", "attention"),
                                "lean_fused_pdl_graph": ("fused", "attention", "pdl"),
                                "lean_fused_pdl_norm_graph": ("fused", "attention", "pdl", "norm_epilogue"),
                                "lean_fused_pdl_epilogues_graph": ("fused", "attention", "pdl", "norm_epilogue",
                                                                   "rotary_epilogue"),
                                "lean_fused_early_graph": ("fused", "attention", "pdl", "norm_epilogue",
                                                           "early_trigger"),
                                "lean_fused_early_products_graph": ("fused", "attention", "pdl", "norm_epilogue",
                                                                    "early_products")}
    assert [k for k, a in arms.REGISTRY.items() if a.cache == "dynamic"] == ["hf_default"]


def test_each_arm_names_the_products_of_its_decoder():
    assert len(accounting.PROJECTIONS[arms.projection_layout("lean_attn_compile")]) == 4  # qkv, o, gate_up, down
    assert len(accounting.PROJECTIONS[arms.projection_layout("graph")]) == 7
    assert arms.is_lean("lean") and not arms.is_lean("compile")
    assert arms.projection_layout("lean_some_future_arm") == "fused"  # rows of an arm this package does not know
    assert arms.projection_layout("hf_some_future_arm") == "hf"
