"""The bundled default model loads with no arguments, is what its card says, and stays exact."""

import inference
from inference import Splice


def test_bundled_model_loads_and_edits_stay_exact():
    model = inference.load_model()
    assert model.path == inference.DEFAULT_MODEL_DIR
    cfg = model.config
    assert cfg.attention == "gelu" and cfg.vq and cfg.vq_codes == 64 and cfg.labels == ("negative", "positive")
    assert model.card["summary"]["imdb_test_accuracy_vq"] > 0.5  # the card records measured figures
    size = sum(p.stat().st_size for p in inference.DEFAULT_MODEL_DIR.iterdir())
    assert size < 40 * 2**20
    text = "The opening hour drags and the dialogue is stiff.\n\nThen the second half is wonderful.\n"
    doc = inference.IncrementalDocument(model, model.tokenizer.encode(text))
    for new_text in (text.replace("wonderful", "dreadful"), "A new first line.\n\n" + text, text[:40]):
        res = doc.apply(inference.diff(doc.token_ids, model.tokenizer.encode(new_text)))
        assert abs(sum(res.scores.values()) - 1) < 1e-9
        check = doc.verify()
        assert check.codes_equal and check.max_abs_diff < 1e-4
    doc.apply([Splice(0, 1, [])])
    assert doc.verify().codes_equal
