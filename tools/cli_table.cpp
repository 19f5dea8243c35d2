// The `rlx` command table: every command, its arguments and flags. The parser (tools/cli.cpp),
// `rlx --help`, `rlx CMD --help` and README.md's command table (`rlx help --markdown`) come from it.
#include "commands.h"
#include "rlx/device.h"

namespace rlx::cli {

Flag device_flag(std::string help) {
  Flag f = text("device", "D", std::move(help), "cpu").named("device");
  f.choices = device_names();
  return f;
}

namespace {

const std::string kModel = "the model file: .rlx text, .onnx or .rten";
Flag bind_flag() {
  return list("bind", "SYM=N,...",
              "size symbolic dims (unbound ones are 1); each SYM must be a dim of the model", Item::NameInt)
      .in(at_least(1))
      .rep();
}
Flag input_flag(const std::string& help) {
  return path("input", "NAME=FILE", help).items(Item::NamePath).rep();
}
Flag fallback_flag() {
  return choice("fallback",
                "place the nodes the device cannot run on this device instead of failing; the graph then runs "
                "in segments and --report shows the nodes moved and the copies between devices",
                "", {"cpu"})
      .named("DEV");
}
std::vector<Flag> dispatch_flags() {
  return {list("force-common", "OP,...", "decompose these ops even where the device has them natively").rep(),
          list("force-native", "OP,...", "these ops must run natively (compilation fails otherwise)").rep(),
          flag("no-fuse", "disable fusion"), fallback_flag()};
}
std::vector<Flag> with(std::vector<Flag> a, const std::vector<Flag>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Command> make_table() {
  std::vector<Command> t;
  t.push_back({"devices",
               "the 16 targets with their status here and, where one cannot run, why",
               "rlx devices [--json]",
               {},
               {flag("json", "print the list as JSON: name, status, runs, description, reason")},
               "",
               "",
               cmd_devices});
  t.push_back(
      {"compile",
       "legalize and lower a model for a device; --report prints the dispatch table (native / "
       "common-IR / rewritten per op and dtype), --dump a level",
       "rlx compile MODEL [--device D] [--report] [--dump=hir|mir|lir] [--dump-after=PASS] [--bind SYM=N,...] "
       "[--out DIR [--board m4|m55] [--parallel P]]",
       {{"MODEL", kModel}},
       with({device_flag("the device to compile for"),
             flag("report", "print the dispatch table: per op and dtype, the path, node count and reason"),
             choice("dump", "print a level of the compiled program (lir: the final schedule, after the device's passes)", "", {"hir", "mir", "lir"})
                 .bare("mir")
                 .named("level"),
             text("dump-after", "PASS", "print the LIR right after one of the device's LIR passes (lower: before any), or the graph after a graph pattern pass (attention-from-matmuls, gelu-into-linear); --report lists those that changed something", ""),
             bind_flag(),
             input_flag("arrays (.npy, or .npz holding NAME) whose shapes (and, for an imported "
                        "model, small ones' values) specialize the model"),
             integer("tp", "N", "shard for N tensor-parallel ranks first (shard-tensor-parallel; prints every "
                     "inserted collective with its byte count)", "1", at_least(1)),
             text("tp-preset", "P", "the Linear roles: mlp, bert, llama (with vocab-parallel embedding and LM head), or a pattern of C, R, - (docs/distributed.md)", "mlp"),
             integer("tp-rank", "R", "which rank's part to compile", "0", at_least(0)),
             path("out", "DIR", "write the device's project into DIR (cortexm: the firmware's C project, "
                  "docs/devices/cortexm.md; fpga: SystemVerilog, ROM images, Verilator testbench, Makefile, "
                  "docs/devices/fpga.md)"),
             choice("board", "the cortexm board: m4 (Cortex-M4, mps2-an386) or m55 (Cortex-M55 + MVE, mps3-an547)",
                    "m4", {"m4", "m55"}),
             integer("parallel", "P", "fpga: output neurons computed per cycle in each layer (docs/devices/fpga.md)", "1",
                     at_least(1))},
            dispatch_flags()),
       "env: RLX_DISPATCH_REPORT=1 prints the dispatch table too.",
       "docs/onnx.md",
       cmd_compile});
  t.push_back(
      {"run",
       "run a model on a device with inputs from .npy/.npz files; print the outputs, --output saves them",
       "rlx run MODEL --input NAME=FILE ... [--output OUT.npy|OUT.npz] [--device D] [--report]",
       {{"MODEL", kModel}},
       with({input_flag("an input array: a .npy file, or an .npz / .safetensors holding NAME"),
             path("output", "FILE", "write the outputs: .npy (one output) or .npz (any number)")
                 .out({".npy", ".npz"}),
             device_flag("the device to run on"),
             flag("report", "print the dispatch table (after the run, before the outputs)"),
             integer("parallel", "P", "fpga: output neurons per cycle in each layer of the simulated datapath", "1",
                     at_least(1))},
            dispatch_flags()),
       "env: RLX_DISPATCH_REPORT=1 prints the dispatch table on stderr; RLX_PROFILE=1 kernel times.",
       "",
       cmd_run});
  t.push_back(
      {"inspect",
       "summarize a model file: ONNX (opsets, inputs/outputs, initializers, op histogram), rten, GGUF "
       "(metadata, tensor table), safetensors (metadata, tensors) or .rlx",
       "rlx inspect MODEL.onnx|MODEL.rten|FILE.gguf|FILE.safetensors|FILE.rlx",
       {{"MODEL", "the file: .onnx, .rten, .gguf, .safetensors or .rlx"}},
       {},
       "",
       "docs/onnx.md",
       cmd_inspect});
  t.push_back(
      {"generate",
       "text generation with a llama-family decoder (llama, mistral, qwen2, qwen3) from a GGUF file or an "
       "HF directory: text in (its own tokenizer, optional chat template), text streamed out; or token ids",
       "rlx generate --model FILE.gguf|DIR --prompt TEXT [--chat] [--max-new 128] [--temperature T] ...",
       {},
       {path("model", "DIR|FILE.gguf", "a .gguf, or a Hugging Face directory (config.json + *.safetensors + tokenizer.json)")
            .exists()
            .req(),
        text("prompt", "TEXT", "the prompt text (tokenized with the model's tokenizer)"),
        list("prompt-ids", "ID,...", "the prompt as token ids (prints ids instead of text)", Item::Int).in(at_least(0)),
        flag("chat", "wrap --prompt as a user message in the model's chat template"),
        flag("interactive", "chat on stdin: each line is a user turn (an empty line ends); --prompt is the first"),
        text("system", "TEXT", "with --chat: a system message before the user message"),
        integer("max-new", "N", "tokens to generate (prompt + N must fit the model's context)", "128",
                at_least(0)),
        integer("batch", "N", "rows generated at once (each from the same --prompt-ids)", "1", at_least(1)),
        real("temperature", "T", "sampling temperature; 0 is greedy", "0", at_least(0)),
        integer("top-k", "K", "sample among the K most likely tokens; 0: all", "0", at_least(0)),
        real("top-p", "P", "sample among the most likely tokens holding mass P", "1", {0, 1, true, false}),
        real("min-p", "P", "drop tokens less likely than P x the most likely one", "0", {0, 1, false, false}),
        real("repeat-penalty", "R", "divide the logits of the last 64 tokens by R (1: off)", "1", at_least(0)),
        integer("seed", "S", "sampling seed", "0", at_least(0)),
        text("stop", "STR", "stop when the text contains STR (repeatable; STR is not printed)").rep(),
        integer("eos", "ID", "--prompt-ids: stop a row at this token id; -1: never", "-1", at_least(-1)),
        device_flag("the device to run on"),
        flag("dequantize", "GGUF: dequantize the projections to f32 instead of keeping them packed"),
        integer("tp", "N", "tensor-parallel ranks (llama preset: heads, FFN and vocabulary split; dense weights; run "
                "under rlx launch -n N or mpirun -n N)", "1", at_least(1)),
        flag("shard-report", "with --tp: print every inserted collective of each compiled step (stderr)"),
        flag("stats", "print prefill and decode tokens/s on stderr")},
       "Text mode stops at the tokenizer's end-of-sequence / end-of-turn tokens.",
       "docs/llm.md",
       cmd_generate});
  t.push_back(
      {"embed",
       "sentence embeddings from a Hugging Face / sentence-transformers BERT directory (e.g. "
       "all-MiniLM-L6-v2), one per line, or the cosine matrix",
       "rlx embed --model DIR [--similarity] (\"sentence\" ... | --file S.txt) [--output E.npy]",
       {{"SENTENCE", "sentences to embed (after --, words may start with -)", 0, -1}},
       {path("model", "DIR", "the model directory (config.json, vocab.txt, *.safetensors)").exists().req(),
        device_flag("the device to run on"),
        fallback_flag(),
        integer("batch-size", "N", "sentences per forward pass", "32", at_least(1)),
        flag("similarity", "print the cosine similarity matrix instead of the embeddings"),
        path("file", "FILE", "read sentences from FILE, one per non-empty line").exists(),
        path("output", "FILE", "write the embeddings, f32 [N, hidden], as .npy").out({".npy"}),
        integer("tp", "N", "tensor-parallel ranks (Megatron column/row Linear, heads split; run under rlx launch "
                "-n N or mpirun -n N)", "1", at_least(1)),
        flag("shard-report", "with --tp: print every inserted collective with its byte count (stderr)"),
        flag("quiet", "no timing line on stderr")},
       "",
       "docs/models.md",
       cmd_embed});
  t.push_back(
      {"serve",
       "an OpenAI-compatible HTTP server: /v1/embeddings (BERT sentence models), /v1/completions and "
       "/v1/chat/completions (llama-family LLMs, streamed as server-sent events), /v1/models, /health, "
       "/metrics; dynamic batching; a web page at /",
       "rlx serve --model M [--model M2 ...] [--device D] [--host 127.0.0.1] [--port 8080]",
       {},
       {text("model", "[NAME=]PATH",
             "a model to serve: an embedding directory (BERT config.json) or an LLM (.gguf / HF directory); "
             "NAME (default: the file or folder name) is the `model` clients ask for")
            .rep()
            .req(),
        device_flag("the device every model runs on"),
        text("host", "ADDR", "the address to listen on", "127.0.0.1"),
        integer("port", "N", "the TCP port; 0: any free one (printed)", "8080", {0, 65535}),
        integer("threads", "N", "HTTP worker threads (each serves one connection at a time; connections beyond are answered 429)", "64", at_least(2)),
        integer("max-body", "BYTES", "larger request bodies are refused with 413", "1048576", at_least(1024)),
        integer("batch-tokens", "N", "embedding: padded tokens per batched forward pass", "8192", at_least(1)),
        integer("max-queue", "N", "requests waiting per model; more get 429", "256", at_least(1)),
        integer("max-active", "N", "generation: sequences decoded together (one batched step)", "16", at_least(1)),
        real("timeout", "SEC", "per request: queued longer is 503, generating longer ends with finish_reason length",
             "120", at_least(0.001)),
        flag("quiet", "no JSON log line per request on stderr")},
       "SIGTERM/SIGINT: stop accepting connections, finish the requests in flight, exit 0.",
       "docs/serve.md",
       cmd_serve});
  t.push_back(
      {"launch",
       "run N ranks of an rlx command under Open MPI's mpirun (tensor-parallel inference, data-parallel "
       "training); each rank reads its rank from mpirun's environment",
       "rlx launch -n N [--transport mpi|ucx] [--hosts FILE] -- rlx CMD ...",
       {{"COMMAND", "the command each rank runs (after --), e.g. rlx embed --tp 2 ...", 1, -1}},
       {integer("n", "N", "number of ranks", "2", at_least(1)),
        choice("transport", "the MPI point-to-point layer: mpi (Open MPI ob1: shared memory, TCP) or ucx", "mpi",
               {"mpi", "ucx", "nccl"}),
        path("hosts", "FILE", "an mpirun hostfile (default: every rank on this host)").exists(),
        text("mpirun", "PATH", "the mpirun to use", "mpirun"),
        flag("dry-run", "print the mpirun command line instead of running it")},
       "Forwards every RLX_* variable to the ranks. RLX_DIST_TIMEOUT_S bounds how long a rank waits in one "
       "collective for a failed peer (default 60).",
       "docs/distributed.md",
       cmd_launch});
  t.push_back(
      {"onnx-suite",
       "run the ONNX backend node tests under NODE_DIR against an expected-failure list (each case in a "
       "child process with a timeout)",
       "rlx onnx-suite NODE_DIR [--xfail LIST] [--json OUT.json] [--write-xfail LIST] [--device D]",
       {{"NODE_DIR", "a folder of test cases (CASE/model.onnx + CASE/test_data_set_0)"}},
       {path("xfail", "LIST", "the expected failures (CASE BUCKET per line)").exists(),
        path("json", "FILE", "write a results summary as JSON").out(),
        path("write-xfail", "LIST", "write the failures as a new expected-failure list").out(),
        text("filter", "S", "run only cases whose name contains S"),
        integer("jobs", "N", "cases run at once", "2", at_least(1)),
        integer("timeout", "SEC", "seconds a case may take", "60", at_least(1)),
        device_flag("the device the cases run on (the committed lists are for cpu)"),
        flag("verbose", "print every failure with its message")},
       "",
       "docs/onnx.md",
       cmd_onnx_suite});
  t.push_back(
      {"train-mnist",
       "train an MLP or small CNN on Fashion-MNIST or the MNIST 8k/2k split: per-epoch test accuracy, "
       "resumable checkpoints, metrics log and plot",
       "rlx train-mnist [--data fashion|mnist] [--model mlp|cnn] [--epochs N] [--batch B] [--device D] ...",
       {},
       {choice("data",
               "the dataset (fashion: Debian's dataset-fashion-mnist; mnist: the 10k test set split 8k/2k)",
               "fashion", {"fashion", "mnist"})
            .named("dataset"),
        path("data-dir", "DIR", "where the IDX files are (default: the dataset's usual folder)"),
        choice("model", "the model", "mlp", {"mlp", "cnn"}).named("model"),
        list("hidden", "N,...", "MLP hidden layer sizes", Item::Int, "128").in(at_least(1)),
        integer("epochs", "N", "epochs to train", "5", {1, 1e6}),
        integer("batch", "B", "batch size", "128", at_least(1)),
        integer("seed", "S", "initialization and shuffling seed", "0", at_least(0)),
        integer("max-steps", "N", "steps per epoch at most; 0: whole epochs", "0", at_least(0)),
        choice("optimizer", "the optimizer", "sgd", {"sgd", "adam", "adamw"}).named("optimizer"),
        real("lr", "X", "learning rate (default: sgd 0.1, else 0.001)", "", above(0)),
        real("momentum", "X", "SGD momentum", "0", {0, 1, false, true}),
        flag("nesterov", "Nesterov momentum"),
        real("weight-decay", "X", "weight decay", "0", at_least(0)),
        choice("schedule", "learning-rate schedule", "constant", {"constant", "step", "cosine", "linear"}),
        integer("warmup", "N", "warmup steps", "0", at_least(0)),
        choice("amp", "mixed precision (f32 master weights; f16 adds dynamic loss scaling)", "f32",
               {"bf16", "f16", "f32"}),
        flag("report", "print the mixed-precision pass's per-op choices"),
        device_flag("the device the training step compiles for"),
        path("checkpoint", "FILE",
             "safetensors written at the end: parameters, optimizer state, loss scale, epoch, data position "
             "and shuffle RNG",
             "rlx_mnist.safetensors")
            .out({}, "none"),
        integer("checkpoint-every", "N", "also write the checkpoint every N steps; 0: at the end only", "0",
                at_least(0)),
        integer("stop-after", "N", "stop after step N (in all), writing the checkpoint, as an interrupted run",
                "", at_least(1)),
        path("resume", "FILE", "continue the run from this checkpoint (bit-identical to an uninterrupted run)")
            .exists(),
        flag("stop-on-nan", "stop with exit 1 when the loss becomes NaN or infinite (otherwise: a warning)"),
        path("metrics", "FILE", "CSV log of loss, lr and accuracies (appended to on --resume)",
             "rlx_mnist_metrics.csv")
            .out({".csv"}, "none"),
        path("plot", "FILE", "PNG of the loss and accuracy curves, drawn with matplotlib from the metrics log",
             "none")
            .out({".png"}, "none"),
        flag("quiet", "no progress bar (it is drawn only when stderr is a terminal)"),
        integer("bench-steps", "N", "time N steps on one batch instead of training; prints p50/p90 JSON", "",
                at_least(1)),
        integer("read-every", "K", "with --bench-steps: read the loss back every K steps", "1", at_least(1)),
        flag("profile", "with --bench-steps and RLX_PROFILE=1: per-kernel times"),
        choice("dump", "with --bench-steps: print a level of the compiled step", "", {"hir", "mir", "lir"})
            .bare("lir")
            .named("level")},
       "",
       "docs/training.md",
       cmd_train_mnist});
  t.push_back(
      {"bench",
       "latency and throughput of any loadable model on a device, on generated inputs: p50/p90/mean, "
       "compile time apart, JSON in bench/results' row layout",
       "rlx bench MODEL [--device D] [--batch B] [--seq S] [--runs N] [--json OUT.json]",
       {{"MODEL", "a .rlx, .onnx, .rten or Qwen3 .gguf file, or a Hugging Face folder (bert, qwen3)"}},
       {device_flag("the device to run on"),
        integer("batch", "B", "batch size: a symbolic dim 0 of every input, and decoder models' batch", "1",
                {1, 1 << 20}),
        integer("seq", "S", "sequence length: a symbolic dim 1, and decoder models' tokens per step", "16",
                {1, 1 << 20}),
        bind_flag(),
        integer("runs", "N", "timed runs", "20", {1, 1e6}),
        integer("warmup", "N", "untimed runs after the first (compiling) one", "3", {0, 1e6}),
        path("json", "FILE", "write the result as JSON (`-`: stdout)").out({".json"}, "-")},
       "Inputs are generated: floats uniform in [-1, 1), integers 0/1 alternating (valid ids, positions, "
       "masks), booleans true. Throughput is batch / p50.",
       "docs/bench.md",
       cmd_bench});
  t.push_back(
      {"splat",
       "3D Gaussian splatting: render a .ply scene, fit one to posed images, or write a synthetic dataset",
       "rlx splat render SCENE.ply --camera FILE --out IMG.png | rlx splat train --images DIR --cameras FILE "
       "| rlx splat synth --out-dir DIR",
       {{"action", "render, train or synth"}, {"scene", "render: the 3DGS .ply to draw", 0, 1}},
       {path("camera", "FILE", "render: cameras (.json, or COLMAP text: a folder or its cameras.txt/images.txt)")
            .exists(),
        integer("camera-index", "I", "render: which camera of the file", "0", at_least(0)),
        path("out", "FILE", "render: the PNG written; train: the .ply written")
            .out({".png", ".ply"}),
        path("images", "DIR", "train: the folder of the cameras' image files").exists(),
        path("cameras", "FILE", "train: cameras (.json or COLMAP text) naming the image files").exists(),
        path("init", "FILE", "train: start from this .ply instead of random Gaussians").exists(),
        integer("init-count", "N", "train: random initial Gaussians", "2000", at_least(1)),
        integer("steps", "N", "train: optimization steps", "1000", at_least(1)),
        integer("holdout-every", "K", "train: every K-th view is held out for PSNR (0: none)", "8", at_least(0)),
        flag("no-densify", "train: no clone/split/prune"),
        integer("log-every", "K", "train: a PSNR line every K steps when stderr is no terminal", "10", at_least(1)),
        integer("sh-degree", "D", "spherical-harmonics degree", "3", {0, 3}),
        list("background", "R,G,B", "background color", Item::Plain, "0,0,0"),
        integer("seed", "S", "random initialization / synthetic scene seed", "0", at_least(0)),
        path("out-dir", "DIR", "synth: the folder written"),
        integer("count", "N", "synth: Gaussians in the scene", "300", at_least(1)),
        integer("views", "N", "synth: cameras on the ring", "16", at_least(1)),
        integer("size", "PX", "synth: image width and height", "128", {8, 8192}),
        device_flag("the device the graphs compile for"),
        flag("quiet", "no progress bar or step lines")},
       "",
       "docs/splatting.md",
       cmd_splat});
  t.push_back(
      {"ops",
       "the op x dtype conformance harness against the reference on a device; --write regenerates the "
       "support matrix",
       "rlx ops [--device D] [--write [docs/ops.md]] [--quiet]",
       {},
       {device_flag("the device to check"),
        path("write", "FILE", "write the support matrix (markdown)").bare("docs/ops.md").out({".md"}),
        flag("quiet", "print only the summary line")},
       "",
       "docs/ops.md",
       cmd_ops});
  t.push_back(
      {"quantize",
       "post-training static int8: calibrate an ONNX model's MatMul/Gemm activations, write a QDQ model "
       "(ONNX Runtime and RLX run it in int8) and print each layer's error against float",
       "rlx quantize MODEL.onnx --calib N|DATA.npz [--method minmax|percentile|mse|entropy] [--per-channel] "
       "[--keep-float auto|NAMES] --out FILE.onnx",
       {{"MODEL", "the float ONNX model"}},
       {text("calib", "N|DATA", "N random batches, or a .npz with one array [batches, ...] per model input", "8"),
        choice("method", "how activation ranges are chosen (docs/quantization.md)", "minmax",
               {"minmax", "percentile", "mse", "entropy"}),
        real("percentile", "P", "percentile method: the share of values kept inside the range, in %", "99.99"),
        flag("per-channel", "one weight scale per output channel (else one per tensor)"),
        choice("reduce-range", "7-bit weights (the AVX2 int8 GEMM's fast exact tile); auto: on for AVX2 hosts "
               "without AVX-512 VNNI", "auto", {"auto", "on", "off"}),
        text("keep-float", "auto|NAMES", "layers left in float: auto (the fewest, worst local SQNR first, that "
             "reach --budget) or comma-separated names", ""),
        real("budget", "COS", "--keep-float auto: the output cosine to reach on the first batch", "0.99"),
        path("out", "FILE", "the QDQ model to write").out({".onnx"}).req(),
        bind_flag(),
        device_flag("the device calibration and the error table run on"),
        flag("quiet", "no progress line")},
       "Activations are u8 asymmetric per tensor, weights i8 symmetric; the error table compares each "
       "MatMul's output with float on the first calibration batch (SQNR = 10 log10(|f|^2 / |f - q|^2)).",
       "docs/quantization.md",
       cmd_quantize});
  t.push_back(
      {"help",
       "this overview, or a command's arguments and flags; --markdown prints README.md's command table",
       "rlx help [COMMAND] [--markdown]",
       {{"COMMAND", "the command to describe", 0, 1}},
       {flag("markdown", "print the command table as markdown (README.md's)")},
       "",
       "",
       cmd_help});
  return t;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> t = make_table();
  return t;
}

}  // namespace rlx::cli
