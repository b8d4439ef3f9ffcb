"""Fine-tuning beside the evaluation flow: the Med-CoDE critique classifier and the critic (LoRA)."""
