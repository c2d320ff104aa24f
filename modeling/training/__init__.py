"""Training: the Trainer loop, compiled steps, optimizers, distribution and
the checkpoint manager."""
