"""What one turn decides and counts: the loop's decision, how it ended, usage and budget."""
