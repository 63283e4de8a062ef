"""The training loop around a deployment.

Public (__all__): loop (the MonitoredTrainingSession loop with slim's behaviour, its hooks
and session_config), checkpoints (finding and restoring them), optimization (optimizers and
learning-rate schedules by name).
"""
__all__ = ['checkpoints', 'loop', 'optimization']
