"""mtp-audit: find where vLLM loses ``spec_step_idx`` between draft loops and MTP layers."""

__version__ = "0.1.0"
