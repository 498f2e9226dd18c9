"""Graph passes over ``onnxnn.fx`` GraphModules (``shape_prop``: shapes and dtypes of every node)."""
