"""Jobs the host declares for itself, through the same hook and contracts as any module."""
