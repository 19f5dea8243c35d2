// The layer module every generated datapath instantiates (docs/devices/fpga.md): SystemVerilog text,
// written beside the generated top module; one copy per project so a project directory stands alone.
#include <string>

namespace rlx::fpga {

extern const char* const kLayerSv;
const char* const kLayerSv = R"SV(
// One int8 fully connected layer of the generated datapath: y[n] = requantize(bias[n] +
// sum_k (x[k] - XZP) * (w[n][k] - wzp[n])), P output neurons per cycle.
//   * input: K bytes streamed in (valid/ready) into one of two banks, so the next vector loads while
//     this one computes;
//   * MAC array: P multipliers read one ROM word of P weights (already minus their zero point) per
//     cycle and one input byte; G = ceil(N / P) groups of K cycles;
//   * requantize: one serial unit, P cycles per group (overlapping the next group's K cycles), the
//     exact rule of src/quant/fixed_point.h: round(acc * m / 2^(31 + shift)) once, + ZP, saturate;
//   * output: N values streamed out (valid/ready, last on the final one). INT_OUT = 0 streams the
//     i32 accumulators instead (a layer whose float epilogue runs on the host).
module rlx_fpga_layer #(
    parameter int K = 16,
    parameter int N = 4,
    parameter int P = 1,
    parameter int WB = 8,          // weight bits (9 when a zero point is folded into them)
    parameter int XZP = 0,         // input zero point
    parameter int XSIGNED = 0,     // input bytes are i8 (else u8)
    parameter int INT_OUT = 1,     // requantized 8-bit outputs (else the i32 accumulators)
    parameter int ZP = 0,          // output zero point
    parameter int LO = -128,       // output range (a fused ReLU raises LO to ZP)
    parameter int HI = 127,
    parameter int EVEN = 1,        // ties to even (else away from zero)
    parameter int OUTW = 8,
    parameter WFILE = "w.hex",     // G*K words of P*WB bits: group g, input k at g*K + k
    parameter BFILE = "b.hex",     // G words of P*32 bits: the i32 biases
    parameter MFILE = "m.hex",     // G*P multipliers (Q31)
    parameter SFILE = "s.hex"      // G*P right shifts plus 31 (1..62)
) (
    input  logic            clk,
    input  logic            rst,
    input  logic            in_valid,
    output logic            in_ready,
    input  logic [7:0]      in_data,
    output logic            out_valid,
    input  logic            out_ready,
    output logic [OUTW-1:0] out_data,
    output logic            out_last
);
  localparam int G = (N + P - 1) / P;
  // index widths: exactly $clog2 of each memory's depth (at least one bit)
  localparam int KB = K > 1 ? $clog2(K) : 1;
  localparam int XB = $clog2(2 * K);
  localparam int AB = G * K > 1 ? $clog2(G * K) : 1;
  localparam int GB = G > 1 ? $clog2(G) : 1;
  localparam int NB = G * P > 1 ? $clog2(G * P) : 1;
  localparam int PB = P > 1 ? $clog2(P) : 1;

  // ---- memories ----
  logic [P*WB-1:0] wrom [G*K];
  logic [P*32-1:0] brom [G];
  logic [31:0]     mrom [G*P];
  logic [5:0]      srom [G*P];
  initial begin
    $readmemh(WFILE, wrom);
    $readmemh(BFILE, brom);
    if (INT_OUT != 0) begin
      $readmemh(MFILE, mrom);
      $readmemh(SFILE, srom);
    end
  end
  logic [7:0] xbuf [2*K];
  logic [OUTW-1:0] obuf [G*P];

  // ---- input loader: two banks ----
  logic [1:0] bank_full;
  logic wb, rb;  // bank being written, bank being read
  logic [KB-1:0] li;
  assign in_ready = !bank_full[wb];
  wire load = in_valid && in_ready;
  always_ff @(posedge clk)
    if (load) xbuf[XB'(wb ? K : 0) + XB'(li)] <= in_data;

  // ---- MAC issue (stage 0) ----
  logic running;  // issuing MACs
  logic busy;     // from start until the vector's last output is written
  logic [GB-1:0] g;
  logic [KB-1:0] k;
  logic [AB-1:0] addr;
  logic obuf_full;
  wire start = !busy && bank_full[rb] && !obuf_full;
  wire issue = running;
  wire issue_last_k = k == KB'(K - 1);
  wire issue_last_g = g == GB'(G - 1);

  // ---- stage 1: ROM and input reads ----
  logic v1, first1, last1;
  logic [GB-1:0] g1;
  logic [P*WB-1:0] w1;
  logic [P*32-1:0] b1;
  logic [7:0] x1;
  always_ff @(posedge clk) begin
    w1 <= wrom[addr];
    b1 <= brom[g];
    x1 <= xbuf[XB'(rb ? K : 0) + XB'(k)];
  end

  // ---- stage 2: P products; stage 3: P accumulators ----
  logic v2, first2, last2;
  logic [GB-1:0] g2;
  logic [P*32-1:0] b2;
  logic signed [WB+10:0] prod [P];
  logic signed [31:0] acc [P];
  wire signed [9:0] xc = (XSIGNED != 0 ? 10'(signed'(x1)) : signed'(10'(x1))) - 10'(XZP);
  always_ff @(posedge clk) begin
    for (int p = 0; p < P; p++) begin
      prod[p] <= (WB+11)'(signed'(w1[p*WB +: WB])) * (WB+11)'(xc);
      if (v2) acc[p] <= (first2 ? signed'(b2[p*32 +: 32]) : acc[p]) + 32'(prod[p]);
    end
    b2 <= b1;
  end

  // ---- group done: capture the accumulators, requantize serially ----
  logic done3;
  logic [GB-1:0] g3;
  logic signed [31:0] res [P];
  logic rq_on;
  logic [PB-1:0] j;
  logic [GB-1:0] rq_g;
  // requantize pipeline: a (select) -> p (product) -> q (shift, remainder) -> write
  logic va, fa;
  logic [NB-1:0] na;
  logic signed [31:0] aa;
  logic vp, fp;
  logic [NB-1:0] np;
  logic signed [63:0] pp;
  logic [5:0] sp;
  logic vq, fq;
  logic [NB-1:0] nq;
  logic signed [63:0] qq, rq, hq;
  logic negq;
  wire fin_write = INT_OUT != 0 ? (vq && fq) : (va && fa);

  always_ff @(posedge clk) begin
    for (int p = 0; p < P; p++)
      if (done3) res[p] <= acc[p];
    aa <= res[j];
    na <= NB'(rq_g) * NB'(P) + NB'(j);
    pp <= 64'(aa) * 64'(signed'(mrom[na]));
    sp <= srom[na];
    np <= na;
    qq <= pp >>> sp;
    rq <= pp & ((64'sd1 <<< sp) - 64'sd1);
    hq <= 64'sd1 <<< (sp - 6'd1);
    negq <= pp[63];
    nq <= np;
  end

  // The rounded, offset and saturated output of the q stage.
  logic up;
  logic signed [63:0] t;
  logic [OUTW-1:0] y;
  always_comb begin
    up = rq > hq || (rq == hq && (EVEN != 0 ? qq[0] : !negq));
    t = qq + (up ? 64'sd1 : 64'sd0) + 64'(ZP);
    if (t < 64'(LO)) y = OUTW'(LO);
    else if (t > 64'(HI)) y = OUTW'(HI);
    else y = OUTW'(t);
  end

  always_ff @(posedge clk) begin
    if (INT_OUT != 0) begin
      if (vq) obuf[nq] <= y;  // padding channels (n >= N) land in unread entries
    end else begin
      if (va) obuf[na] <= OUTW'(aa);
    end
  end

  // ---- output streamer ----
  logic [NB-1:0] e;
  assign out_valid = obuf_full;
  assign out_data = obuf[e];
  assign out_last = e == NB'(N - 1);

  // ---- control ----
  always_ff @(posedge clk) begin
    if (rst) begin
      bank_full <= '0;
      wb <= 1'b0;
      rb <= 1'b0;
      li <= '0;
      running <= 1'b0;
      busy <= 1'b0;
      g <= '0;
      k <= '0;
      addr <= '0;
      v1 <= 1'b0;
      v2 <= 1'b0;
      done3 <= 1'b0;
      rq_on <= 1'b0;
      va <= 1'b0;
      vp <= 1'b0;
      vq <= 1'b0;
      obuf_full <= 1'b0;
      e <= '0;
    end else begin
      if (load) begin
        li <= li + 1'b1;
        if (li == KB'(K - 1)) begin
          li <= '0;
          bank_full[wb] <= 1'b1;
          wb <= !wb;
        end
      end
      if (start) begin
        running <= 1'b1;
        busy <= 1'b1;
        g <= '0;
        k <= '0;
        addr <= '0;
      end else if (issue) begin
        addr <= addr + 1'b1;
        k <= k + 1'b1;
        if (issue_last_k) begin
          k <= '0;
          g <= g + 1'b1;
          if (issue_last_g) running <= 1'b0;
        end
      end
      v1 <= issue;
      first1 <= k == '0;
      last1 <= issue_last_k;
      g1 <= g;
      v2 <= v1;
      first2 <= first1;
      last2 <= last1;
      g2 <= g1;
      done3 <= v2 && last2;
      g3 <= g2;
      if (done3) begin
        rq_on <= 1'b1;
        j <= '0;
        rq_g <= g3;
      end else if (rq_on) begin
        j <= j + 1'b1;
        if (j == PB'(P - 1)) rq_on <= 1'b0;
      end
      va <= rq_on;
      fa <= rq_on && j == PB'(P - 1) && rq_g == GB'(G - 1);
      vp <= va;
      fp <= fa;
      vq <= vp;
      fq <= fp;
      if (fin_write) begin  // the vector's last output is written: release its input bank, stream it
        obuf_full <= 1'b1;
        busy <= 1'b0;
        bank_full[rb] <= 1'b0;
        rb <= !rb;
      end
      if (out_valid && out_ready) begin
        e <= e + 1'b1;
        if (out_last) begin
          e <= '0;
          obuf_full <= 1'b0;
        end
      end
    end
  end
endmodule
)SV";

}  // namespace rlx::fpga
