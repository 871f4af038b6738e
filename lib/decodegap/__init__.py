"""decodegap: rebuild and re-measure 'Memory-Bound but Not Bandwidth-Limited' (batch-1 LLM decode).

Modules, one concern each:
  paths      repository paths           records    raw CSV schema, validating loader, atomic append
  hardware   GPU registry, env capture  models     model registry and building
  accounting weight and KV bytes        roofline   t_floor, R_floor, the cell table
  decode     the timing harness (arms)  sweep      fresh-process sweeps that resume
  runs       run ids and env.json       *_bench    each notebook's measurements
  stats      bootstrap CIs, summaries   plots      figures (DataFrame -> Figure)
  cli        python -m decodegap ...
"""

__version__ = "0.1.0"
