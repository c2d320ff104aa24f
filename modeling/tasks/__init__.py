"""What each script does (pretraining, classifier, extract), their metrics,
and the shared runner pieces."""
