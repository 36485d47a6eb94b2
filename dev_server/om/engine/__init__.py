"""The observation and reflection cycles: synchronous, buffered in the background, activated, by resource."""
