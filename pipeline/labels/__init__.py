"""What people say about the answers, written through the store: doctors' labels of judge metrics
(``human_labels``), of rubric criteria (``criterion_labels``) and of critiques (``critique_labels``), the review
queue's verdicts (saved as labels), arena votes (``arena_votes``) and the human-eval plan (``human_eval``). It sits
above the store and the read models it uses, below the pages and the CLI that call it; a label CSV's reading and
row checks are the dataset layer's (``pipeline.dataset.label_csv``), its import command is ``importing``."""
