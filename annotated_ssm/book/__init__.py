"""annotated_ssm.book: what only the chapters and the website need, apart from the library.

    plotting           the chapters' figures (matplotlib)
    explorer_numerics  the explorers' numbers and Figure 3's, computed with the library
    explorer_figures   the explorers' figures, updated in place
    widgets            the interactive explorers (ipywidgets), live with a kernel
    static_explorer    the HTML and JavaScript of an explorer's precomputed frames (website)
    display            the chapters' helpers: show_source, check, the book's figure style
    compiled_memory    XLA's planned temporaries of a compiled layer (chapter 9, benchmark)

This sub-package imports the library (``annotated_ssm`` and its modules) and the library
never imports it (``tests/test_package_layout.py`` checks the direction), so the core install
(``pip install annotated-ssm``, without the ``[book]`` extra that brings matplotlib and
ipywidgets) imports and trains without it.
"""
