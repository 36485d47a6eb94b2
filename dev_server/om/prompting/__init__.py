"""What the observer and reflector are asked and how their answers are read; what the actor is shown."""
