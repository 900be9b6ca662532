"""cli"""

from cotdyn.files.arrow_memory import free_arrow_memory

free_arrow_memory()  # before any command imports pyarrow (cotdyn.files.arrow_memory says why)
