
/device:GPU:0¢Stream #7(Kernel)ÿÿÿÿÿÿÿÿÿ")À„=€µ"*loop_fusion.1" *" d")€‰z€µ"*loop_fusion.1" *" e"*À·€µ"*loop_fusion.1" *" f"loop_fusion_kernel*correlation_id*
program_id*
hlo_op
	/host:CPU"corpus