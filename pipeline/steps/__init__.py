"""The run's steps, one module each, registered in flow order: ``--stages`` names them and the run calls them in
this order (``pipeline.runner``). A step is ``async def step_x(ctx: RunContext)``; steps never import the runner."""

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
