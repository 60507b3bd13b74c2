"""What the model is sent besides the chat itself: context fitting, retrieved sources, attachments."""
