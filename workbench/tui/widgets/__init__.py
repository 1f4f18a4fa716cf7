"""The app's panels: each renders state from workbench.tui.model and nothing else."""
