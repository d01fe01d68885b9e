#include "models/lowering.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "config/scenario.h"
#include "models/graph_vocabulary.h"
#include "report/simulation.h"
#include "tests/scenario_helpers.h"
#include "sim/engine.h"

using namespace trainsim;

namespace {

// GEMMs and attention at a fixed rate; everything else (memory-bound kernels, communication)
// free, so the only idle time left is the pipeline bubble.
class ComputeOnly final : public sim::TimingModel {
 public:
  sim::Duration kernel_time(const sim::Kernel& k) override {
    if (k.kernel_class == sim::KernelClass::kGemm || k.kernel_class == sim::KernelClass::kFlashAttention) {
      return sim::Duration::from_seconds(k.flops.count() / 1e14);
    }
    return sim::Duration::zero();
  }
  const sim::CommCost& collective_cost(const sim::CommOp&, sim::CommId, bool) override { return free_; }
  const sim::CommCost& transfer_cost(sim::Bytes, sim::RankId, sim::RankId, std::uint16_t, bool) override { return free_; }
  std::vector<sim::Bandwidth> resource_capacities() override { return {}; }

 private:
  sim::CommCost free_;
};

models::ModelSpec uniform_model() {
  models::ModelSpec m = config::load_model("gpt3-1.7b");
  m.num_layers = 24;
  m.vocab_size = 128;  // negligible logits, so every stage does the same work
  m.seq_length = 1024;
  return m;
}

// Bubble fraction: (iteration time - busy time of a stage) / busy time of a stage, for the
// busiest stage (the last one computes the tiny logits GEMM on top of the same layers).
double bubble_fraction(models::PipelineSchedule schedule, std::int64_t pp, std::int64_t vp, std::int64_t m) {
  const models::ModelSpec model = uniform_model();
  models::ParallelSpec p;
  p.pipeline_model_parallel_size = pp;
  p.virtual_pipeline_model_parallel_size = vp;
  models::TrainingSpec t;
  t.micro_batch_size = 1;
  t.global_batch_size = m;
  t.pipeline_schedule = schedule;
  const models::Workload w = models::lower(model, p, t, pp);
  ComputeOnly timing;
  sim::Engine engine(w.graph, timing, sim::EngineOptions{true, {}, models::kComputeStream});
  const sim::EngineResult r = engine.run();
  double busy = 0;
  for (const sim::RankAccount& a : r.accounts) busy = std::max(busy, (a.busy[models::kForward] + a.busy[models::kBackward]).seconds());
  return (r.makespan.seconds() - busy) / busy;
}


const std::string& kDefault = tests::kDefaultScenario;

}  // namespace

TEST_CASE("models/lowering: bubble fraction is (p-1)/m for GPipe and 1F1B, (p-1)/(vm) interleaved") {
  for (std::int64_t m : {8, 16, 32}) {
    const double md = static_cast<double>(m);
    CAPTURE(m);
    CHECK(bubble_fraction(models::PipelineSchedule::k1F1B, 4, 1, m) == doctest::Approx(3.0 / md).epsilon(0.02).scale(0));
    CHECK(bubble_fraction(models::PipelineSchedule::kGpipe, 4, 1, m) == doctest::Approx(3.0 / md).epsilon(0.02).scale(0));
    CHECK(bubble_fraction(models::PipelineSchedule::kInterleaved, 4, 2, m) ==
          doctest::Approx(3.0 / (2 * md)).epsilon(0.02).scale(0));
    CHECK(bubble_fraction(models::PipelineSchedule::kInterleaved, 4, 3, m) ==
          doctest::Approx(3.0 / (3 * md)).epsilon(0.02).scale(0));
  }
}

TEST_CASE("models/lowering: one rank class per stage, one simulated rank per class") {
  const config::Scenario s = config::load_scenario(kDefault);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  CHECK(w.graph.num_classes() == 16);
  CHECK(w.graph.simulated_ranks().size() == 16);
  CHECK(w.graph.num_ranks() == 1024);
  CHECK(w.microbatches == 192);
  // Stage 0 rank 0, stage 1 starts after TP x DP = 64 ranks.
  CHECK(sim::index(w.graph.simulated_ranks()[1]) == 64);
  std::int64_t layers = 0;
  for (const auto& st : w.stages) layers += st.chunks[0].second;
  CHECK(layers == 96);
}

TEST_CASE("models/lowering: knobs move the right numbers the right way") {
  const auto none = tests::simulate_file(kDefault, {"training.recompute_granularity=none"});
  const auto selective = tests::simulate_file(kDefault, {"training.recompute_granularity=selective"});
  const auto full = tests::simulate_file(kDefault, {"training.recompute_granularity=full"});
  // Recomputation trades memory for hardware FLOPs.
  CHECK(selective.stages[0].activation_peak_bytes < none.stages[0].activation_peak_bytes);
  CHECK(full.stages[0].activation_peak_bytes < selective.stages[0].activation_peak_bytes);
  CHECK(selective.workload->flops.hardware > none.workload->flops.hardware);
  CHECK(full.workload->flops.hardware > selective.workload->flops.hardware);
  CHECK(selective.workload->flops.model == doctest::Approx(none.workload->flops.model));

  // The distributed optimizer divides optimizer state by the data-parallel size (8).
  const auto dist = tests::simulate_file(kDefault, {"parallelism.use_distributed_optimizer=true"});
  CHECK(static_cast<double>(dist.stages[1].static_memory.optimizer_states) ==
        doctest::Approx(static_cast<double>(selective.stages[1].static_memory.optimizer_states) / 8).epsilon(0.001));

  // 16-bit main gradients: the optimizer casts its shard to fp32 before clipping and the Adam
  // step (Megatron Core "Distributed optimizer": 20 B per parameter, not 18), so under full
  // recomputation, where activations stay below 4 B per parameter, the step sets the peak.
  const auto fp16_grads =
      tests::simulate_file(kDefault, {"training.recompute_granularity=full", "training.grad_reduce_in_fp32=false"});
  const auto fp32_grads = tests::simulate_file(kDefault, {"training.recompute_granularity=full"});
  for (std::size_t i = 0; i < fp16_grads.stages.size(); ++i) {
    const auto& st = fp16_grads.stages[i];
    const std::int64_t params = st.static_memory.weights / 2;
    CHECK(st.static_memory.gradients - st.static_memory.wgrad_placeholders == 2 * params);
    CHECK(st.activation_peak_bytes >= 4 * params);
    CHECK(st.activation_peak_bytes < 4 * params + fp32_grads.stages[i].activation_peak_bytes);
  }

  // More micro-batches per iteration shrink the bubble's share.
  const auto small = tests::simulate_file(kDefault, {"training.global_batch_size=256"});
  const double share_small = small.breakdown.pipeline_bubble_s / small.iteration_time_s;
  const double share_big = selective.breakdown.pipeline_bubble_s / selective.iteration_time_s;
  CHECK(share_big < share_small);
}

TEST_CASE("models/lowering: every schedule and recompute mode runs without deadlock") {
  for (const char* sched : {"gpipe", "1f1b"}) {
    for (const char* rc : {"none", "selective", "full"}) {
      CAPTURE(sched);
      CAPTURE(rc);
      const auto r = tests::simulate_file(kDefault, {std::string("training.pipeline_schedule=") + sched,
                                    std::string("training.recompute_granularity=") + rc, "training.global_batch_size=128"});
      CHECK(r.iteration_time_s > 0);
    }
  }
  const auto inter = tests::simulate_file(kDefault, {"parallelism.virtual_pipeline_model_parallel_size=3", "training.pipeline_schedule=interleaved",
                                    "training.global_batch_size=256"});
  CHECK(inter.iteration_time_s > 0);
  const auto block = tests::simulate_file(kDefault, {"training.recompute_granularity=full", "training.recompute_method=block",
                                    "training.recompute_num_layers=2", "training.global_batch_size=128"});
  CHECK(block.iteration_time_s > 0);
}

namespace {

// The default scenario simulated with `overrides` and then the `common` ones.
report::RunResult simulate_default(std::vector<std::string> overrides, const std::vector<std::string>& common) {
  overrides.insert(overrides.end(), common.begin(), common.end());
  return tests::simulate_file(kDefault, overrides);
}

}  // namespace

TEST_CASE("models/lowering: a pipeline layout runs as the split it spells out") {
  // The layout that spells out decoder_first/last_pipeline_num_layers = 8 / 4 over two virtual
  // stages: same graph, same result to the byte.
  auto with = [](std::vector<std::string> extra) {
    return simulate_default(std::move(extra), {"training.global_batch_size=512", "training.recompute_granularity=full"});
  };
  const auto split = with({"training.pipeline_schedule=interleaved", "parallelism.virtual_pipeline_model_parallel_size=2", "parallelism.decoder_first_pipeline_num_layers=8",
                           "parallelism.decoder_last_pipeline_num_layers=4"});
  const auto spelled = with({"training.pipeline_schedule=interleaved", "parallelism.pipeline_model_parallel_layout=\"Et*4|(t*3|)*14,t*2|t*4|(t*3|)*14,t*2L\""});
  CHECK(spelled.iteration_time_s == split.iteration_time_s);
  CHECK(spelled.peak_bytes_per_gpu == split.peak_bytes_per_gpu);
  // Stages holding only the embedding or only the loss, and one-layer chunks, run too.
  const auto sparse = with({"parallelism.pipeline_model_parallel_layout=\"E|(t*7|)*13,t*5|L\""});
  CHECK(sparse.iteration_time_s > 0);
  const auto fine = with({"training.pipeline_schedule=interleaved", "parallelism.pipeline_model_parallel_layout=\"Et|(tt|)*22,ttt|(tt|)*22,ttt|tL\""});
  REQUIRE(fine.workload->stages.size() == 16);
  CHECK(fine.workload->stages[0].chunks.size() == 3);
  CHECK(fine.workload->stages[0].chunks[0].second == 1);
  CHECK(fine.workload->stages[15].chunks[2].second == 1);
  CHECK(fine.iteration_time_s > 0);
}

TEST_CASE("models/lowering: the embedding and the loss counted in the split take a layer from the end stages") {
  // 94 layers + embedding + loss = 96 units over 16 stages: 5 layers on the first and last
  // stage, 6 on the others - what decoder_first/last_pipeline_num_layers = 5 / 5 spells out.
  auto with = [](std::vector<std::string> extra) {
    return simulate_default(std::move(extra), {"model.num_layers=94", "training.global_batch_size=512"});
  };
  const auto accounted = with({"parallelism.account_for_embedding_in_pipeline_split=true", "parallelism.account_for_loss_in_pipeline_split=true"});
  const auto spelled = with({"parallelism.decoder_first_pipeline_num_layers=5", "parallelism.decoder_last_pipeline_num_layers=5"});
  CHECK(accounted.iteration_time_s == spelled.iteration_time_s);
  CHECK(accounted.peak_bytes_per_gpu == spelled.peak_bytes_per_gpu);
  // With two virtual stages: 3 units per chunk, the very first and very last chunk 2 layers.
  const auto interleaved = with({"training.pipeline_schedule=interleaved", "parallelism.virtual_pipeline_model_parallel_size=2",
                                 "parallelism.account_for_embedding_in_pipeline_split=true",
                                 "parallelism.account_for_loss_in_pipeline_split=true"});
  const auto layout = with({"training.pipeline_schedule=interleaved", "parallelism.pipeline_model_parallel_layout=\"Ett|(ttt|)*30,ttL\""});
  CHECK(interleaved.iteration_time_s == layout.iteration_time_s);
  REQUIRE(interleaved.workload->stages.size() == 16);
  CHECK(interleaved.workload->stages[0].chunks[0].second == 2);
  CHECK(interleaved.workload->stages[0].chunks[1].second == 3);
  CHECK(interleaved.workload->stages[15].chunks[1].second == 2);
}

TEST_CASE("models/lowering: activation peaks are Korthikanti's per-layer memory times the micro-batches in flight") {
  // GPT 7.5B, TP 4 + SP, selective recomputation, 2 stages of 18 layers, 8 micro-batches.
  const std::string file = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json";
  for (const char* schedule : {"1f1b", "gpipe"}) {
    CAPTURE(schedule);
    const auto r = tests::simulate_file(file, {std::string("training.pipeline_schedule=\"") + schedule + "\""});
    const models::LayerDims& d = r.workload->dims;
    const auto per_layer = static_cast<double>(models::layer_activation_bytes(d, true));
    const double in_flight_gpipe = 8;
    for (std::size_t stage = 0; stage < 2; ++stage) {
      CAPTURE(stage);
      // 1F1B keeps (stages - stage) micro-batches in flight, GPipe all of them.
      const double in_flight = std::string(schedule) == "gpipe" ? in_flight_gpipe : static_cast<double>(2 - stage);
      double expected = in_flight * 18 * per_layer;
      if (stage == 0) expected += in_flight * static_cast<double>(models::embedding_activation_bytes(d));
      if (stage == 1) {
        // Final norm and logits inputs and the fp32 exp(logits), per micro-batch in flight, and
        // the 16-bit logits of the one in the cross-entropy.
        expected += in_flight * static_cast<double>(models::output_activation_bytes(d)) +
                    2.0 * static_cast<double>(d.tokens() * d.v);
      }
      CHECK(static_cast<double>(r.stages[stage].activation_peak_bytes) == doctest::Approx(expected).epsilon(0.03));
    }
  }
}

TEST_CASE("models/lowering: fused attention carries the model's attention dropout") {
  // GPT-3's presets keep the published attention dropout of 0.1; fused kernels draw the mask
  // inside (priced at the calibration's dropout rate), unfused ones as a memory-bound pass.
  auto flash_kernels = [](double dropout, bool flash) {
    models::ModelSpec model = uniform_model();
    model.attention_dropout = dropout;
    models::ParallelSpec p;
    models::TrainingSpec t;
    t.micro_batch_size = 1;
    t.global_batch_size = 1;
    t.attention_kernel = flash ? models::AttentionKernel::kFlash : models::AttentionKernel::kUnfused;
    const models::Workload w = models::lower(model, p, t, 1);
    std::pair<int, int> with_without{0, 0};
    for (std::uint32_t c = 0; c < w.graph.num_classes(); ++c) {
      for (const sim::Kernel& k : w.graph.rank_class(c).kernels) {
        if (k.kernel_class == sim::KernelClass::kFlashAttention) ++(k.dropout ? with_without.first : with_without.second);
      }
    }
    return with_without;
  };
  const auto with = flash_kernels(0.1, true);
  CHECK(with.first > 0);
  CHECK(with.second == 0);
  const auto without = flash_kernels(0.0, true);
  CHECK(without.first == 0);
  CHECK(without.second > 0);
  CHECK(flash_kernels(0.1, false) == std::pair<int, int>{0, 0});
}
