"""HTTP routes: one module per resource. Routes turn HTTP into store and service calls."""
