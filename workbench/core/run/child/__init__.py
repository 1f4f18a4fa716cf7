"""Child side of the process boundary: what runs in the processes the runner starts (run/protocol.py).

    worker          a worker's life: warm up, take one job, run its stages, stream events, exit
    judge_process   the judge, forked from the worker before kernel.py is imported: the only verdicts
    template        the warm template workers and compile processes are forked from
    compile_pool    compile processes without a GPU, and the GPU worker's server for them
    precompile      the stage that compiles a shard's benchmark cases ahead; compile-only launches
    compiler_warmup, launcher_cache   the compiler's first-use costs paid ahead; launchers kept across saves
    torch_compile_process   the torch.compile check, in a process started with a verification on a GPU

Never imported by the parent's modules, except for the constants of run/protocol.py.
"""
