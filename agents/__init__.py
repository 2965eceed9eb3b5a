"""Learned schedulers: policies with the cluster's structure, trained with stable-baselines3."""
