"""The run's steps, one module each, registered in flow order: ``--stages`` names them and the run calls them in
this order (``pipeline.runner``). A step is ``async def step_x(ctx: RunContext)``; steps never import the runner.

An LLM step also says what it has still to do, ``pending(ctx: Inputs) -> list[Pending]`` (``steps.context``),
registered in ``PENDING``: its run sends those calls and the dry run's estimate (``pipeline.estimate``) tallies
them, so adding an LLM step is its module plus an entry in each registry."""

from pipeline.registry import Registry

STEPS = Registry("stage", {
    "translate": "pipeline.steps.translate:step_translate",
    "retrieve": "pipeline.steps.retrieve:step_retrieve",
    "generate": "pipeline.steps.generate:step_generate",
    "translate-responses": "pipeline.steps.translate:step_translate_responses",
    "judge": "pipeline.steps.judge:step_judge",
    "pairwise": "pipeline.steps.pairwise:step_pairwise",
    "rubric": "pipeline.steps.rubric:step_rubric",
    "lexical": "pipeline.steps.lexical:step_lexical",
    "medcode": "pipeline.steps.medcode:step_medcode",
    "medcode-label": "pipeline.steps.medcode_label:step_label",
    "accuracy": "pipeline.steps.accuracy:step_accuracy",
    "safety": "pipeline.steps.safety:step_safety",
    "sanity": "pipeline.steps.sanity:step_sanity",
})

PENDING = Registry("stage", {  # the stages that call an LLM (retrieve, lexical and safety do not)
    "translate": "pipeline.steps.translate:pending_queries",
    "generate": "pipeline.steps.generate:pending",
    "translate-responses": "pipeline.steps.translate:pending_responses",
    "judge": "pipeline.steps.judge:pending",
    "pairwise": "pipeline.steps.pairwise:pending",
    "rubric": "pipeline.steps.rubric:pending",
    "medcode": "pipeline.steps.medcode:pending",
    "medcode-label": "pipeline.steps.medcode_label:pending",
    "accuracy": "pipeline.steps.accuracy:pending",
    "sanity": "pipeline.steps.sanity:pending",
})
