"""The Triton interpreter made to behave as a GPU does, for verification on a machine without one: what each
fix repairs, and how a construct the CPU cannot run becomes "cannot judge here" rather than a wrong verdict.

    fixes           every fix, applied once per interpreter worker (`apply`); out-of-bounds loads and stores
    gaps            what ran on a GPU and failed here: libdevice calls, inline PTX, scalars used as tensors
    libdevice       libdevice's functions computed on the CPU, by symbol
    python_syntax   Python the compiler gives a meaning of its own: `and`/`or` between tensors, aliases of tl
                    builtins, device contexts on the CPU
"""
