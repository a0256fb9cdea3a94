"""What a store's AI tools are, as the contract declares them: the field types and the tool
declarations.  The pool checks (``--against``), the client and the reference store all read them
here, so none of them imports another for it."""
