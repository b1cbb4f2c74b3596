"""Stage 4, price: plans and a GPU in, times out.

``gpu_spec``/``hardware``/``kernelbench_gpus`` are the GPUs' dense datasheet peaks;
``precision`` says which unit (tensor cores, CUDA cores) and which math each op runs on;
``roofline`` divides work by peaks into the speed of light and builds the :class:`Result`;
``estimate`` is the performance model (achievable rates, launches, host time); ``step_figures``
prices a training step per phase.
"""
