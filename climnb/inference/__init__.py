"""A trained network run over new data, and its rivers put through the river rules.

* :mod:`~climnb.inference.predict` - batched inference from a model bundle, back on the input grid;
* :mod:`~climnb.inference.inputs` - what it reads: fields as they come, or DeepCAM sample files;
* :mod:`~climnb.inference.postprocess` - the network's rivers checked by the river definition.

Import from the submodules.
"""
