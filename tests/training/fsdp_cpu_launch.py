"""Run `yunshan` with accelerate's FSDP on CPU processes (gloo), for the tests of FSDP2 on a machine without GPUs.

    accelerate launch --config_file recipes/accelerate/fsdp_cpu.yaml tests/training/fsdp_cpu_launch.py cpt --config R.yaml

accelerate (1.15) sets DistributedType.FSDP only inside the branch of AcceleratorState.__init__ for accelerator
process groups (MULTI_GPU, MULTI_NPU, MULTI_XPU, ...); a CPU-only launch is MULTI_CPU, so an FSDP launch config
silently trains DDP there (yunshan stops with an error instead: yunshan.training.engines.engine_of). torch's FSDP2
itself runs on CPU with gloo. This launcher lets AcceleratorState take the FSDP branch for MULTI_CPU, exactly as it
does for MULTI_GPU (same plugin, read from the launch config's environment), and then runs `yunshan.cli`: everything
after that is accelerate's own FSDP2 path (fully_shard of every decoder layer, rank 0's weights broadcast when
sharding, full state dicts for checkpoints and the final save). On GPUs nothing of this is needed.
"""

import os
import sys

import accelerate.state
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

_init = accelerate.state.AcceleratorState.__init__


def _init_with_fsdp_on_cpu(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" and \
            self.distributed_type == DistributedType.MULTI_CPU:
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = kwargs.get("fsdp_plugin") or FullyShardedDataParallelPlugin()


accelerate.state.AcceleratorState.__init__ = _init_with_fsdp_on_cpu

if __name__ == "__main__":
    from yunshan.cli import main

    sys.exit(main())
