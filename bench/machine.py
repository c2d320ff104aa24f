"""What a benchmark ran on: CPU model, core count, the vector and matrix
extensions that decide which TensorFlow kernels run (AVX2 only, AVX-512,
native bf16 dot products, AMX), and the load average. The benchmarks put it
in their JSON output: absolute times do not carry across machines, and
whether mixed_bfloat16 beats float32 depends on these flags."""

import os
import platform

_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def describe():
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and "cpu_set" not in flags:
                    cpu = value.strip()
                    flags.add("cpu_set")
                elif key.strip() == "flags":
                    flags.update(value.split())
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "cpu_flags": [flag for flag in _FLAGS if flag in flags],
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }
