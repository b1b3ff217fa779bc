#!/usr/bin/env python3
"""Reliability target 11, the greedy-principal half alone: ``bench_isolation.py --attacks greedy``.

    python benchmarks/bench_greedy.py                     # 10 s baseline, 20 s greedy phase
    python benchmarks/bench_greedy.py --attack 60 --json greedy.json

The bystander (127.0.0.1) calls ``echo`` while another anonymous principal (127.0.0.2) opens
sessions until 429 (``--sessions-cap``), fills its request quota (``--requests-cap``) with long
calls and keeps knocking; every option of bench_isolation.py applies. Its default run has this
attack and the misbehaving plugin's at the same time.
"""

from __future__ import annotations

import bench_isolation

if __name__ == "__main__":
    bench_isolation.main(default_attacks="greedy")
