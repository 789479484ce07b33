"""embedpyramid: reproducible evaluation of embedding models along the evaluation pyramid."""
