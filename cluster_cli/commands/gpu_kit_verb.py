"""``cluster-cli gpu-kit``: the GPU proof in one directory (docs/gpu-validation.md)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("gpu-kit")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The kit directory (new, empty, or an earlier kit, which is replaced).")
@click.option("--nvml-plugin", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Slurm's gpu_nvml.so built for this machine's slurmd "
                   "(default: scripts/build-nvml-plugin.sh's build of it).")
def gpu_kit(output: Path, nvml_plugin: Path | None) -> None:
    """Make the GPU proof kit: Slurm and munge from this machine's Debian release without apt,
    Slurm's NVML plugin, cluster-cli and the training checks, one `run` command (no torch: the
    GPU machine's own Python is used)."""
    from cluster_cli.gpu_kit.pack import make_kit, plugin_for, this_release

    release = this_release()
    made = make_kit(output, release, plugin_for(nvml_plugin))
    click.echo(f"wrote {output}: {made.total_bytes / 2**20:.1f} MiB in {made.files} files, {release}, "
               f"Slurm {made.slurm_version}, programs need glibc >= {made.glibc_floor} ({made.make_s} s)")
    click.echo(f"on the GPU machine, as root: {output.name}/run RESULTS_DIR [--python PYTHON_WITH_TORCH]")
