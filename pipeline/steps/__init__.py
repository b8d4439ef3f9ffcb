"""The run's steps, one module each, registered in flow order: ``--stages`` names them and the run calls them in
this order (``pipeline.runner``). Each module declares its stage once, ``STEP = Step(...)`` (``steps.spec``): how it
runs, what it requires of the config, which models it calls and in what role, what it has still to send (an LLM
step's ``pending``), the tables it writes, its own config section. The runner, the dry run's estimate
(``pipeline.estimate``) and the config (``pipeline.config``) derive everything from that declaration, so adding a step
is its module plus one entry here. Steps never import the runner."""

from pipeline.registry import Registry

STEPS = Registry("stage", {
    "translate": "pipeline.steps.translate:QUERIES",
    "retrieve": "pipeline.steps.retrieve:STEP",
    "generate": "pipeline.steps.generate:STEP",
    "translate-responses": "pipeline.steps.translate:RESPONSES",
    "judge": "pipeline.steps.judge:STEP",
    "pairwise": "pipeline.steps.pairwise:STEP",
    "rubric": "pipeline.steps.rubric:STEP",
    "lexical": "pipeline.steps.lexical:STEP",
    "medcode": "pipeline.steps.medcode:STEP",
    "medcode-label": "pipeline.steps.medcode_label:STEP",
    "accuracy": "pipeline.steps.accuracy:STEP",
    "safety": "pipeline.steps.safety:STEP",
    "sanity": "pipeline.steps.sanity:STEP",
})
