"""The GPU proof's runner: what ``gpu-kit/run`` starts on the GPU machine (docs/gpu-validation.md).

Standard library only until the render step, which puts the kit's wheels on ``sys.path`` when the
machine's Python lacks pydantic. Every step's verdict is written to the results directory as it
ends (``record``), so a run cut short still says how far it got.
"""
