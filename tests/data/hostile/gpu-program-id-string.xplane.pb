
â/device:GPU:0ùStream #7(Kernel)Ë")¿Ñ=Äµ"*loop_fusion.1" *" d",ÄâzÄµ"*loop_fusion.1" **x" e"*¿ç∑Äµ"*loop_fusion.1" *" f"loop_fusion_kernel*correlation_id*
program_id*
hlo_op
	/host:CPU"corpus