"""Training pipeline for vq-lsp: tokenizer, dense OPT teacher, VQ distillation, fine-tuning,
evaluation and export of the model folder that ``inference.load_model`` reads."""
