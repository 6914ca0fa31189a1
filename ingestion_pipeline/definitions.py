"""The Dagster code location (workspace.yaml points here).

Resources, ops, jobs, sensors and schedules arrive with the orchestration issue; until
then the location loads and is empty, so `dagster definitions validate` already works.
"""

import dagster as dg

defs = dg.Definitions()
